#!/bin/bash
python3 /tests/score.py > /logs/verifier/reward.json
