"""Evals: many runs of stored tasks, pass@k, honest failure accounting and resumable groups.

``entity`` reads eval files and writes evals as versioned entities; ``groups`` keeps a run
group's slots in the document store (claims, so two processes never run one slot twice, and
finished slots a resume reuses); ``execute`` runs the slots through one small seam
(:class:`~agent_env.evals.execute.LocalRunner`); ``report`` turns the runs into the per-task
table, the JSON and the ``--output-dir`` files; ``passk`` is the unbiased estimator.
"""
