"""The dashboard's screens: main, help, GPU detail, process detail, kill confirmation."""
