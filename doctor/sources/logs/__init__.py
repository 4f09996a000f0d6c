"""Log parsing: one parser per engine family, the line policy (`lines`), a streaming scanner, and engine
detection."""
