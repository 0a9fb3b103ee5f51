"""Tests of the local stack's Gafaelfawr and registry emulators over real HTTP."""
