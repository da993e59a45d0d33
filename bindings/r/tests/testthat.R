library(testthat)
library(thrifty)

test_check("thrifty")
