"""Decoding under exact masks: model backends, the GRID-owned decode loop, termination."""

from grid_sql.decode.records import StepKind, StepRecord, StopReason, mask_digest

__all__ = ["StepKind", "StepRecord", "StopReason", "mask_digest"]
