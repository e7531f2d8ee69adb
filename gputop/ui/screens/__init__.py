"""The dashboard's screens: help, GPU detail, process detail, kill confirmation."""
