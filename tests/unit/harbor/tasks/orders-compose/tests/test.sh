#!/bin/bash
# Harbor's contract: write the reward to /logs/verifier/reward.txt. The rows are read from the
# db service, by its name, as the agent reached it.
rows=$(psql -tA -F= -c "SELECT id, status FROM orders ORDER BY id" | tr '\n' ' ')
echo "orders: $rows"
if [ "$rows" = "1001=delivered 1002=delivered 1003=shipped " ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
