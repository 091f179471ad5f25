"""Evidence: the decision ledger, results reports, profiles, verification of results files, and intake."""
