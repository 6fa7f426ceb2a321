"""Pure text helpers at the bottom of the layers: CJK bigrams, tags and query terms, cleaning, names, terminal
escaping, fact keys. They import nothing of Lantern but ``lantern.model``."""
