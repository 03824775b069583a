"""The request domains acceptance models know, in their canonical order.

A request's domain (math, code, chat) selects its acceptance curve; the
published acceptance figures (docs/model/drafters.md) are grouped the same way.
Everything that names or orders domains uses this one tuple.
"""

DOMAINS: tuple[str, ...] = ("math", "code", "chat")
