"""The scheduling queue (activeQ, backoffQ, unschedulable pool, QueueingHints) and the nominator."""
