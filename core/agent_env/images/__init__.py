"""Image-build planning that needs no container engine, shared by every provider that builds.

Why in the core: the ``docker`` provider builds on the host's engine, while VM-like providers
(tensorlake, tenki, smol_vm) build on a daemon inside their sandbox; all of them must send the
same context and give the same content-hash tag, and plugins may not import each other.

Modules: :mod:`.context` (what a build sends, ``.dockerignore`` matching, its digest and tar),
:mod:`.hermetic` (our protocol wheel inside every env image), :mod:`.plan` (the build plan and
its content-hash tag). The build itself lives with an engine (docker_env, the sandbox's daemon).
"""
