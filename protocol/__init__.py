"""shoal.protocol: a sans-I/O codec for RocketMQ remoting frames (bytes in, frames out)."""
