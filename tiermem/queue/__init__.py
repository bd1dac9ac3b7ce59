"""The debounced, durable update queue (R28-R35)."""
