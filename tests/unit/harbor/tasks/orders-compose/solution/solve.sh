#!/bin/bash
psql -c "UPDATE orders SET status = 'delivered' WHERE id = 1002"
