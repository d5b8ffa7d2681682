"""The tuning loop: ask/tell over trials, stored and resumable; objectives, budgets and the result."""
