"""What the client sent and got back: request budgets, reply bodies, the front-end in between."""
