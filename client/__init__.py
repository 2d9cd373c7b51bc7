"""shoal.client: producers, consumers and admin that talk to brokers over the remoting protocol."""
