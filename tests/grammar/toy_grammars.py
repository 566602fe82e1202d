"""Small grammars shared by the grammar/parser/differential tests."""

CRUD = r"""
//! category TABLE_NAME COLUMN_NAME
start: statement [SEMI]
statement: select_stmt | insert_stmt | delete_stmt | drop_stmt
select_stmt: SELECT select_list FROM table_ref [where_clause]
select_list: STAR | column ("," column)*
column: COLUMN_NAME | COUNT "(" STAR ")"
table_ref: TABLE_NAME [IDENT]
where_clause: WHERE expr
?expr: expr OR and_expr | and_expr
?and_expr: and_expr AND cmp | cmp
?cmp: atom (EQ | LE | LT) atom | atom
?atom: COLUMN_NAME | NUMBER | STRING | "(" expr ")"
insert_stmt: INSERT INTO TABLE_NAME VALUES "(" atom ("," atom)* ")"
delete_stmt: DELETE FROM TABLE_NAME [where_clause]
drop_stmt: DROP TABLE TABLE_NAME

SELECT: "select"i
FROM: "from"i
WHERE: "where"i
INSERT: "insert"i
INTO: "into"i
VALUES: "values"i
DELETE: "delete"i
DROP: "drop"i
TABLE: "table"i
COUNT: "count"i
AND: "and"i
OR: "or"i
STAR: "*"
SEMI: ";"
EQ: "="
LE: "<="
LT: "<"
TABLE_NAME: /[A-Za-z_][A-Za-z0-9_]*/ | /"[^"]+"/
COLUMN_NAME: /[A-Za-z_][A-Za-z0-9_]*/ | /"[^"]+"/
IDENT: /[A-Za-z_][A-Za-z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?/
STRING: /'([^']|'')*'/
WS: /[ \t\r\n]+/
COMMENT: /--[^\n]*/
%ignore WS
%ignore COMMENT
"""
