"""One decision module per ruleset: pure handlers ``(message, state, dice) -> reply`` and the
audit columns of each decision. ``bridge.dispatch`` routes messages to them."""
