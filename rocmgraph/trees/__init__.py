"""Source trees at their pins: patches checked and applied (patches), what a tree's build
does by itself (treefacts), and the recipe's assumptions checked against the trees
(preflight).

Builds on graph/ and reaches git through outside/.
"""
