"""What will run: the runs of a plan, their budget and time estimate, designations, arrivals."""
