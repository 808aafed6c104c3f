"""One run from start to end (run.py: its phases; keeper.py: its network; runstate.py:
its folder's state), and the lab kernel's boots that run them (boot.py; the host's side
lab_runs.py, the guest's guest_runs.py; net/probe in the guest: lab_command.py)."""
