"""The evidence models of the alert rules: windows of counts, conversations, dispersion,
season, a service's history and the tests that judge it."""
