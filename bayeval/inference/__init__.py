"""How a posterior is obtained: exact Gaussian conditioning, Laplace, MCMC, type-II ML."""
