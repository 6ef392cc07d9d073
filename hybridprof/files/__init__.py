"""Files in and out: reading saved sessions, plans and diffs (`storage`), importing the user's
model file and making its inputs (`loader`), and writing outputs atomically and safely
(`outputs`)."""
