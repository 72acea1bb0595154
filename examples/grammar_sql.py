"""Grammar-constrained generation: SQL SELECT queries and arithmetic from a Lark grammar.

Every output is a sentence of the grammar (checked here with lark's own Earley parser).
Keywords are case-insensitive terminals ("select"i); %ignore'd whitespace may appear
between any two tokens.

Run: .venv/bin/python examples/grammar_sql.py
"""
from lark import Lark

import structgen

SQL = r"""
start: select_stmt [";"]
select_stmt: SELECT select_list FROM NAME [WHERE cond] [ORDER BY NAME [ASC | DESC]] [LIMIT INT]
select_list: "*" | NAME ("," NAME)*
?cond: cond OR conj | conj
?conj: conj AND comparison | comparison
comparison: NAME CMP (NAME | INT | STRING)
CMP: "=" | "<>" | "<" | ">" | "<=" | ">="
SELECT: "select"i
FROM: "from"i
WHERE: "where"i
ORDER: "order"i
BY: "by"i
ASC: "asc"i
DESC: "desc"i
LIMIT: "limit"i
AND: "and"i
OR: "or"i
NAME: /[a-z_][a-z0-9_]*/
STRING: /'[^']*'/
%import common.INT
%import common.WS
%ignore WS
"""

ARITH = r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

QUESTIONS = [
    "Table users(id, name, age, city). Write a SQL query listing the names of users "
    "older than 30, oldest first.",
    "Table orders(id, user_id, total). Write a SQL query returning the 5 largest orders.",
]


def main(model=None):
    model = structgen.load(model)
    sql = structgen.grammar(model, SQL)
    check = Lark(SQL, parser="earley", lexer="dynamic_complete")
    for q in QUESTIONS:
        query = sql(q + " Answer with the query only.", max_tokens=60)
        check.parse(query)  # raises if the output were not a sentence
        print(f"{q}\n  -> {query}\n")
    arith = structgen.grammar(model, ARITH)
    expr = arith("Write a short arithmetic expression that equals 42, like (6 * 7).",
                 max_tokens=80)
    Lark(ARITH, parser="earley", lexer="dynamic_complete").parse(expr)
    print(f"42 = {expr}")


if __name__ == "__main__":
    main()
