print("herald: under construction")
