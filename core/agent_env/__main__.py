"""``python -m agent_env`` runs the same CLI as ``agent-env``."""

from agent_env.cli.entry import console

if __name__ == "__main__":
    console()
