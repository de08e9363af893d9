"""Best-model identification under a budget of model–item evaluations."""
