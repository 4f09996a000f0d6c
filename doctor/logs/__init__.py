"""Log parsing: one parser per engine family, a streaming scanner, and engine detection."""
