"""A digest's record as the engine stores it: as its schema (``ImageRecordSchema``) dumps it,
the routes' body but for the engine's status."""

from __future__ import annotations

from app.schemas.records import SPACED, RecordText
from app.workloads.image.models import ImageRecord
from app.workloads.image.schemas import ImageRecordSchema

IMAGE_TEXT = RecordText(ImageRecord, ImageRecordSchema, separators=SPACED)
"""A digest's record as the engine stores it."""
image_json = IMAGE_TEXT.dump
parse_image = IMAGE_TEXT.parse
