#!/bin/bash
# Runs in the verifier's own container: /verifier-marker is there, and /app/answer.txt is the
# artifact copied from the agent's container.
if [ -f /verifier-marker ] && [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then
  echo "the answer is right"
  echo 1 > /logs/verifier/reward.txt
else
  echo "marker: $(cat /verifier-marker 2>&1); answer: $(cat /app/answer.txt 2>&1)"
  echo 0 > /logs/verifier/reward.txt
fi
