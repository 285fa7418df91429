//! One rank's part of a tensor: there already, or still being computed by the rank's lane
//! (`crate::runtime::lanes`). A part's shape is known either way, so metadata never waits.

use crate::runtime::lanes::Later;
use burn_backend::{Shape, TensorMetadata};

pub(crate) enum Part<T: 'static> {
    Ready(T),
    /// Issued to a lane, with the shape it will have.
    Issued {
        value: Later<T>,
        shape: Shape,
    },
}

impl<T: TensorMetadata + 'static> Part<T> {
    pub(crate) fn shape(&self) -> Shape {
        match self {
            Part::Ready(p) => p.shape(),
            Part::Issued { shape, .. } => shape.clone(),
        }
    }

    /// The value, if no lane is computing it.
    pub(crate) fn ready(&self) -> Option<&T> {
        match self {
            Part::Ready(p) => Some(p),
            Part::Issued { .. } => None,
        }
    }

    /// The value, waited for if a lane is computing it.
    pub(crate) fn into_value(self) -> T {
        match self {
            Part::Ready(p) => p,
            Part::Issued { value, shape } => {
                let p = value.take();
                debug_assert_eq!(
                    p.shape(),
                    shape,
                    "firemesh: a lane's part has another shape than issued"
                );
                p
            }
        }
    }
}

impl<T: Clone + 'static> Clone for Part<T> {
    fn clone(&self) -> Self {
        match self {
            Part::Ready(p) => Part::Ready(p.clone()),
            Part::Issued { value, shape } => Part::Issued {
                value: value.clone(),
                shape: shape.clone(),
            },
        }
    }
}
