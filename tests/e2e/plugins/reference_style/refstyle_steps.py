"""A step type written the reference framework's way: its SDK (``TaskStep``, ``from_dict``,
``async execute(context)``), its verification shape, its entry-point group. Not ours: the
test checks that such a plugin loads and runs unchanged."""

from agent_env.task_step.context import TaskStepContext
from agent_env.task_step.task_step import TaskStep


class CountWordsTaskStep(TaskStep):
    """Count the words of a text and check the count."""

    type = "count_words"

    def __init__(self, id, version, text, expected_words, verifier_id=None, depends_on=None,
                 fail_task_on_error=True):
        super().__init__(id, version, depends_on=depends_on,
                         fail_task_on_error=fail_task_on_error)
        self.text = text
        self.expected_words = expected_words
        self.verifier_id = verifier_id or id

    def config_problems(self):
        if self.expected_words < 0:
            return [f"count_words '{self.id}': expected_words must be >= 0"]
        return []

    @classmethod
    def from_dict(cls, data):
        return cls(**cls._base_from_dict(data), text=data["text"],
                   expected_words=data["expected_words"], verifier_id=data.get("verifier_id"))

    async def execute(self, context: TaskStepContext) -> TaskStepContext:
        words = len(self.text.split())
        seed = context.metadata.get("seed") or {}
        context.metadata.setdefault("verifications", {})[self.verifier_id] = {
            "results": [{"id": "count", "result": words == self.expected_words,
                         "description": f"{words} words (seed {seed.get('n')})"}],
            "score": 1.0 if words == self.expected_words else 0.0,
        }
        context.metadata["counted_words"] = words
        return context
