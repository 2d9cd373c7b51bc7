"""shoal.store: the RocketMQ 4.x compatible storage engine (CommitLog, ConsumeQueue, IndexFile)."""
