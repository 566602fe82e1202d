"""The real-server fixtures of ``tests/db`` (scratch databases, roles of known grants), for
the dialect objects' server tests."""

from tests.db.conftest import (  # noqa: F401 - pytest finds fixtures by name
    my_admin,
    my_setup,
    my_user_url,
    pg_admin,
    pg_role_url,
    pg_setup,
)
