"""Services: the functions that write. API handlers, admin classes and commands call these."""
