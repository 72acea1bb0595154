"""The core: terms, lazy DFAs, vocabularies, token automata and their masks, the
Constraint and Matcher contracts, the error tree. Knows no front end."""
