"""Loaded into the running container by the task (load_artifact with container_name)."""

import os
import pwd
import unittest

import calc  # /app, where the tests are run from


class CalcTests(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(calc.add(2, 3), 5)

    def test_mean(self) -> None:
        self.assertEqual(calc.mean([1.0, 2.0, 6.0]), 3.0)
        with self.assertRaises(ValueError):
            calc.mean([])

    def test_runs_as_the_user_the_step_names(self) -> None:
        self.assertEqual(pwd.getpwuid(os.getuid()).pw_name, "tester")


if __name__ == "__main__":
    unittest.main()
