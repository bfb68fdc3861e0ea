"""Reading the machine into doctor's facts (doctor/facts.py): one module per area, each function bounded in time."""
