"""Helpers shared by the tests: graph generators, oracles, fakes, CLI runner, cached captures."""
