"""``agent-env gc``: find and remove sandboxes that runs which died left behind.

A run tears down what it brought up, always; but a ``kill -9``, a power cut or a crashed
machine never reaches the teardown. Providers therefore label what they create with who made
it and until when it may live:

* ``agentenv.owner``: the process that created the sandbox (host, boot, pid, start time);
* ``agentenv.expires``: Unix seconds after which the sandbox is garbage whoever owns it;

both written by :func:`agent_env.sandbox.ownership.ownership_labels`, the same for every provider.

A sandbox is removed when it has expired or its owner process is gone; a sandbox of a live run
is kept, and so is one whose owner cannot be judged (another host, or no owner recorded) or
that was made under another state root (``agentenv.state``: that root's deployments ledger, not
this one, says whether it is wanted) until it expires. ``gc`` asks every registered provider
that can list sandboxes (``provider.list_sandboxes(labels)``) and terminates through the same
contract a run's teardown uses, so it knows no provider by name except the core's own
``local`` one, whose work folders record their owner's pid in ``sandbox.json``.

Deployments (``agent-env env deploy``) outlive their process on purpose: a sandbox the
deployments ledger (:mod:`agent_env.deployments`) records is kept until its record expires, then
removed with its record (see :func:`apply_deployments`).

Run records are judged the same way: a record still ``running`` whose process (its ``owner``,
the ``agentenv.owner`` form) is gone from this host can never end by itself, so gc marks it
``abandoned`` with the reason (:func:`agent_env.tasks.records.dead_runs`); a record of another
host, or without an owner, is left as it is.

Temporary files a writer killed mid-write left in the local object store (their names record
the writer's process) are removed too, and so are scratch folders (a bundle conversion's, an env
build context laid out from the store) whose claim in the state root names a process that is
gone (:mod:`agent_env.scratch`).

Env images are not removed: they are named by their content and shared by every run (a cache),
not made per run. What a build killed mid-way left is: the untagged step images that carry the
label every build sets, once an hour old (a provider's ``prune_build_leftovers``; an image a
container uses, such as a running build's, is refused by the engine and kept).
"""

from __future__ import annotations

import sys

import click

from agent_env.cli.console import echo
from agent_env.plural import plural
from agent_env.sandbox.leftovers import (
    apply_deployments,
    build_leftovers,
    dead_run_records,
    find_leftovers,
    remove,
    remove_stale,
    stale_records,
    stale_temporary_files,
    stamp,
)
from agent_env.scratch import stale_scratch


def _parse_labels(values: tuple[str, ...]) -> dict[str, str]:
    labels = {}
    for value in values:
        key, sep, wanted = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint="--label")
        labels[key] = wanted
    return labels


@click.command("gc")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before removing.")
@click.option("--label", "label_values", multiple=True, metavar="KEY=VALUE",
              help="Only sandboxes carrying this label (repeatable), e.g. agentenv.run=ID.")
def gc(dry_run: bool, yes: bool, label_values: tuple[str, ...]) -> int:
    """Remove sandboxes (containers, networks, work folders) left by runs that died.

    A sandbox goes when its TTL has passed or the process that made it is gone; a live run's
    are kept. A run record left `running` by a process that is gone is marked `abandoned`.
    Env images are a shared cache and stay.
    """
    import asyncio

    from agent_env.deployments import deployments

    labels = _parse_labels(label_values)
    found, skipped = asyncio.run(find_leftovers(labels))
    ledger = deployments()
    found = apply_deployments(found, ledger)
    # with --label only some sandboxes were listed: the others' records cannot be judged
    stale = [] if labels else stale_records(found, skipped, ledger)
    leftovers = [f for f in found if f.remove]
    kept = [f for f in found if not f.remove]
    instances, dead = dead_run_records(labels)
    temporary = [] if labels else stale_temporary_files()
    scratch = [] if labels else stale_scratch()
    images, image_problems = ([], []) if labels else asyncio.run(build_leftovers(dry_run=True))
    asked = {note.split(":", 1)[0] for note in skipped}  # one line per provider that failed
    image_problems = [p for p in image_problems if p.split(":", 1)[0] not in asked]
    for note in [*skipped, *image_problems]:
        echo(f"Not asked: {note}", err=True)
    if kept:
        live = sum(1 for f in kept if f.live)
        of_live = f" ({live} of live runs)" if live else ""
        echo(f"Keeping {plural(len(kept), 'sandbox')}{of_live}:")
        for item in kept:
            echo(item.line())
    if not leftovers and not stale and not dead and not temporary and not images \
            and not scratch:
        echo("Nothing to remove.")
        return 0
    verb = "Would remove" if dry_run else "Removing"
    if temporary:
        echo(f"{verb} {plural(len(temporary), 'temporary file')} a killed writer left:")
        for path in temporary:
            echo(f"  {path}")
    if scratch:
        echo(f"{verb} {plural(len(scratch), 'scratch folder')} killed commands left:")
        for left in scratch:
            echo(f"  {left.folder or left.claim} ({left.why})")
    if images:
        echo(f"{verb} {plural(len(images), 'image')} killed builds left:")
        for line in images:
            echo(line)
    if dead:
        mark = "Would mark" if dry_run else "Marking"
        echo(f"{mark} {plural(len(dead), 'run')} abandoned:")
        for run in dead:
            echo(f"  {run.record.instance_id}: {run.reason}")
    if leftovers:
        echo(f"{verb} {plural(len(leftovers), 'sandbox')}:")
        for item in leftovers:
            echo(item.line())
    if stale:
        echo(f"{verb} {plural(len(stale), 'expired deployment')} no listing showed:")
        for entry in stale:
            echo(f"  {entry.provider} {entry.sandbox_id} (deployed {entry.kind} "
                       f"{entry.instance_id}, expired at {stamp(entry.expires_at)})")
    if dry_run:
        echo("Dry run: nothing was removed.")
        return 0
    if not yes:
        from agent_env.errors import UserError

        if not sys.stdin.isatty():
            raise UserError("nothing removed: pass --yes to remove without asking "
                            "(or --dry-run to only list)")
        if not click.confirm("Remove them?", default=False):
            raise UserError("nothing removed (answer y, or pass -y)")
    marked = sum(1 for run in dead if instances.abandon(run.record, run.reason))
    for path in temporary:
        path.unlink(missing_ok=True)
    for left in scratch:
        left.remove()
    removed_images, image_problems = (asyncio.run(build_leftovers(dry_run=False)) if images
                                      else ([], []))
    problems = asyncio.run(remove_stale(ledger, stale)) + [
        f"Could not prune images: {p}" for p in image_problems]
    for line in problems:
        echo(line, err=True)
    failed = asyncio.run(remove(leftovers))
    for item, error in failed:
        echo(f"Could not remove {item.provider} {item.sandbox_id}: {error}", err=True)
    not_removed = {(item.provider, item.sandbox_id) for item, _ in failed}
    for item in leftovers:  # a removed deployment's record goes with it
        entry = ledger.for_sandbox(item.provider, item.sandbox_id)
        if entry is not None and (item.provider, item.sandbox_id) not in not_removed:
            ledger.remove(entry.instance_id)
    done = len(leftovers) - len(failed)
    if dead:
        echo(f"Marked {plural(marked, 'run')} abandoned.")
    if temporary:
        echo(f"Removed {plural(len(temporary), 'temporary file')}.")
    if scratch:
        echo(f"Removed {plural(len(scratch), 'scratch folder')}.")
    if images:
        echo(f"Removed {plural(len(removed_images), 'image')}.")
    if leftovers:
        echo(f"Removed {plural(done, 'sandbox')}.")
    if stale:
        echo(f"Removed {plural(len(stale) - len(problems), 'expired deployment')}.")
    return 1 if failed or problems else 0
