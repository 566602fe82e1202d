"""Adapters over the pipeline in :mod:`grid_sql.ask`: PEP 249 (``dbapi``), SQLAlchemy,
pandas, Jupyter, the ``chat`` and ``demo`` terminal fronts and the console helpers they share
with ``grid_sql.cli``. Nothing here decides what SQL is generated or allowed; the import
contract (``.importlinter``) keeps ``ask`` from importing this package.
"""
