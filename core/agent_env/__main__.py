"""``python -m agent_env`` runs the same CLI as ``agent-env``."""

from agent_env.cli.entry import main

if __name__ == "__main__":
    main()
