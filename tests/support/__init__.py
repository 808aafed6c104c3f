"""Test support: tools the tests and benchmarks use that the product does not ship."""
