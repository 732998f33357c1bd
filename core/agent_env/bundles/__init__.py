"""Bundles: folders of tasks, envs, artifacts and evals, parsed, planned and written to stores.

``parse`` reads a folder, ``plan`` checks everything (all problems at once) and ``ledger``
writes what changed as new entity versions. Nothing here imports heavy packages.
"""
