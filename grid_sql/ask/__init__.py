"""The question-to-answer pipeline: the :class:`~grid_sql.ask.asker.Asker`, its prompt and
budget, generation (public types a remote generator plugs into), execution, results, values,
conversations, streaming and async.

Apart from :mod:`grid_sql.front`, which holds only adapters over this pipeline (DB-API,
SQLAlchemy, pandas, Jupyter, the chat and demo fronts, console helpers): the import contract
(``.importlinter``) keeps ``ask`` below ``front``, so no adapter concern leaks into it.
Import from the modules (``grid_sql.ask.asker``, ``grid_sql.ask.result``...); this package
imports nothing eagerly, so ``import grid_sql`` stays light.
"""
