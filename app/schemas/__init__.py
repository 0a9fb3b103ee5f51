"""Marshmallow schemas for the configuration and every request and response body."""
