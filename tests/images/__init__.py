"""Tests of lab image tags, listing and prepulling."""
