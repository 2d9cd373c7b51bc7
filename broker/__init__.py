"""shoal.broker: the NameServer and Broker processes (asyncio shells around shoal.store and shoal.protocol)."""
